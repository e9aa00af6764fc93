"""The sans-IO MirrorCoordinator over `__mirror_state` (KIP-1279 "MirrorCoordinator")."""
