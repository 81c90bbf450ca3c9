"""Dense-layer weight compression with a shared reference curve (Vatai and Suda, 2018)."""
