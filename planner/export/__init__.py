"""Launch material: a plan turned into the configs and commands of the frameworks that run it."""
