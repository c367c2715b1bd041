"""quotaform: quota-as-code for Apache Kafka client quotas.

The flow, one module per arrow::

    manifest files --load--> DesiredState --+
                                            +-- diff (pure) --> Plan --+-- render
    cluster --describe (strict)--> LiveState+                          +-- apply --> read-back
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
