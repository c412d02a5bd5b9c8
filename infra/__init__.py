"""Deployment: the local stack of real services, Maven POMs for jars, kind and images."""
