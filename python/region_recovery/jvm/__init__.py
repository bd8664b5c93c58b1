"""The JVM boundary: where the plugin jar is, how Python reaches it, and the events it sends.

``packaging`` enables the plugin on a session builder, ``gateway`` finds the plugin's bridge in a
running driver JVM, ``drain`` moves event batches to Python on a thread of its own, and ``events``
decodes them (the wire format written by the plugin's BatchEncoder).
"""
