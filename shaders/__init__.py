"""WGSL kernel templates (Jinja2), one subfolder per kernel family; shipped inside the package."""
