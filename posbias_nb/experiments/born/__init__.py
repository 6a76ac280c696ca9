"""The born floor: studies of models at initialization.

======================  =========================================================
:mod:`.born_layouts`    born with a layout: random-init profiles against each layout's row
:mod:`.born_scales`     where real models are born: the scales an initialiser sets
:mod:`.scale`           born at scale: 7B-class configurations on a width ladder
:mod:`.replay`          replays of the structural theory's published configurations
======================  =========================================================

It imports the base floor only.
"""
