"""Sources that gather facts into the machine model. Only these modules touch the outside."""
