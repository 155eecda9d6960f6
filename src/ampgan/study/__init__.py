"""`ampgan compare`: the study in one command, its verdict and its report."""
