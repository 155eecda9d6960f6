"""`ampgan doctor`: will this model train in fp16 or bf16? Ranges per layer, a loss scale, alignment."""
