"""The JVM boundary: where the plugin jar is, how Python reaches it, and the events it sends.

``packaging`` enables the plugin on a session builder, ``gateway`` finds the plugin's bridge in a
running driver JVM, ``drain`` moves event batches to Python on a thread of its own, ``wire`` decodes
them (the format written by the plugin's BatchEncoder) into the types of ``events``, and ``commands``
is the port through which the controllers act on the driver JVM.
"""
