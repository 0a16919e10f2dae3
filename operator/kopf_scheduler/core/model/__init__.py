"""The objects the scheduler reads and how it reads them: typed pods, nodes and the rest (``objects``), API
bodies into them (``parsing``, ``fields``), quantities (``resources``), policy field helpers (``specs``),
times (``timestamps``), in-tree volume plugins' CSI names (``csi_translation``) and the API server's paths
(``paths``). The bottom room: it imports nothing else of the core."""
