"""The SpeQuloS service logic on a database (issue 20): each module holds one of the service's
modules (the Credit System, the Information and Oracle modules, the Scheduler) with its tables on
its own ``METADATA``; the HTTP layer (:mod:`skylease.service`) calls them."""
