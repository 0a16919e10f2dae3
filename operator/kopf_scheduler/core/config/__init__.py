"""From a policy to a profile: the registry of plugins and their v1.9 names (``registry``), a profile of
configured plugins (``profile``), extenders' configuration (``extenders``), ``SchedulingPolicy`` specs
(``policy``), KubeSchedulerConfiguration (``scheduler_config``), legacy Policy JSON (``legacy``) and which
policy serves a schedulerName (``ownership``). It sits above ``plugins/`` (it instantiates them)."""
