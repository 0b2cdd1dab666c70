"""Helpers for testing skylease against real components it does not start itself in production.

``skylease.testing.site``: a test site of N SSH hosts on this machine (one OpenSSH sshd each, on its
own loopback address, in namespaces of its own), started and stopped by the tests or by
``python -m skylease.testing.site start|stop|status`` (docs/howto/site.md). Nothing in ``src/``
imports this package; it imports ``skylease.runtime`` and ``skylease.model`` only.

This file imports nothing on purpose: ``python -m skylease.testing.site`` runs ``site.py`` as
``__main__``, and a package that imported it first would hold a second copy of the module.
"""
