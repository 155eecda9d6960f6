"""What training costs: the arithmetic, the price catalog, and the cost report."""
