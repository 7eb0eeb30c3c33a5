
identity**
INPUT0INT8*€ÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ