"""`advisor web`: the advisor in a browser, as the user who opens it (Open OnDemand runs it so)."""
