"""How ampgan writes and reads any file: atomically, and with one clear error when one is damaged."""
