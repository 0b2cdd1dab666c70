"""Long-lived services: the warm ``skylease run`` service (:mod:`skylease.service.warm`)."""
