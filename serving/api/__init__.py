"""The HTTP surface: dependencies and one router per resource."""
