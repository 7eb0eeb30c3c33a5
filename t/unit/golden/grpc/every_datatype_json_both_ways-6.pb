
identityj*
INPUT0INT8:€ÿ