
identity*
INPUT0INT8:€ÿ