"""The built-in GANs, one module each. A module here that defines a model function decorated with
`@built_in("name")` (gan/contract.py) is a built-in model: adding one means adding its module, nothing
else (gan/registry.py finds them)."""
