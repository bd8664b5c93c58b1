"""The JVM boundary: where the plugin jar is, how Python reaches it, and the events it sends.

``packaging`` enables the plugin on a session builder, ``gateway`` finds the plugin's bridge in a
running driver JVM, ``drain`` moves event batches to Python on a thread of its own, ``wire`` decodes
them (the format written by the plugin's BatchEncoder; its numbers in the generated ``_wire_codes``) into
the types of ``events``, and ``commands`` is the port through which the controllers act on the driver JVM.
``tool`` runs a main class of the plugin jar in a JVM of its own (reading a job's event store).
"""
