"""The run configuration, checked when the DAG loads (docs/configuration.md).

- ``schema``: the ``Config`` model of one run, its blocks and what derives from them
  (``role_settings``); the ``llm`` block is ``llm``, the protocol stages' blocks ``stages``;
- ``loading``: reading config files and merging them as Snakemake does, then validating the
  merged dict into a ``Config`` or one line naming the key and the layer that set it;
- ``protocols``: the presets a config can hold itself to (``protocol: paper``);
- ``base``: what every block shares (strict models, the config's errors).
"""
