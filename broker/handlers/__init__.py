"""tidelog package."""
