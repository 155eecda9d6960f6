"""How good are the samples: the evaluator network and the metrics on its features."""
