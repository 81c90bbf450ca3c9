"""What a site installs besides the package, shipped in it (`files/`), and `advisor init-site`, which writes
it out for the paths an install uses: the settings template, the policies, the constraints and the units."""
