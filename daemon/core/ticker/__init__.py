"""The ticker: interval and schedule ticks for the container's own tasks, each planned time
settled once as a slot, kept across restarts, and caught up at start.

``ticker`` (the loops and their plans), ``clock``, ``tick_slots`` (a tick settled as a slot),
``slots`` (the slot record), ``busy`` (``on_busy``), ``slot_state`` and ``state_file`` (the
state directory), ``catchup`` (the slots planned while the daemon was down).
"""
