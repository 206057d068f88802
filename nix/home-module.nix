# home-manager module for agentpack.
#
#   programs.agentpack = {
#     enable = true;
#     home = "${config.xdg.dataHome}/agentpack";   # AGENTPACK_HOME (optional)
#     stagingRoot = "/tmp/agentpack-staging";      # AGENTPACK_STAGING_ROOT (optional)
#   };
{ self }:
{ config, lib, pkgs, ... }:
let
  cfg = config.programs.agentpack;
in
{
  options.programs.agentpack = {
    enable = lib.mkEnableOption "agentpack, the package manager for AI coding agent configuration";

    package = lib.mkOption {
      type = lib.types.package;
      default = self.packages.${pkgs.stdenv.hostPlatform.system}.default;
      defaultText = lib.literalExpression "agentpack.packages.\${system}.default";
      description = "The agentpack package to install.";
    };

    home = lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "/data/agentpack";
      description = "Sets AGENTPACK_HOME: the user-wide cache, store and state directory. Null keeps the default ($XDG_DATA_HOME/agentpack).";
    };

    stagingRoot = lib.mkOption {
      type = lib.types.nullOr lib.types.str;
      default = null;
      example = "/tmp/agentpack-staging";
      description = "Sets AGENTPACK_STAGING_ROOT: where staged generations are selected. Null keeps the per-project temp default.";
    };
  };

  config = lib.mkIf cfg.enable {
    home.packages = [ cfg.package ];
    home.sessionVariables =
      lib.optionalAttrs (cfg.home != null) { AGENTPACK_HOME = cfg.home; }
      // lib.optionalAttrs (cfg.stagingRoot != null) { AGENTPACK_STAGING_ROOT = cfg.stagingRoot; };
  };
}
