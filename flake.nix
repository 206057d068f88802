{
  description = "agentpack: pin, lock and stage the skills, plugins, commands, agents, rules, hooks and MCP servers your AI coding agents use";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      cargoToml = builtins.fromTOML (builtins.readFile ./Cargo.toml);

      # The package, as a function of a package set, so the overlay and `packages` share it.
      agentpackFor = pkgs: pkgs.rustPlatform.buildRustPackage {
        pname = "agentpack";
        version = cargoToml.workspace.package.version;
        src = self;
        cargoLock.lockFile = ./Cargo.lock;
        cargoBuildFlags = [ "--package" "agentpack-cli" ];
        # The end-to-end tests start local servers and real git repositories; run them with `.ci/run`.
        doCheck = false;
        meta = {
          description = "Package manager for AI coding agent configuration";
          license = pkgs.lib.licenses.mit;
          mainProgram = "agentpack";
        };
      };
    in
    {
      packages = forAllSystems (pkgs: rec {
        agentpack = agentpackFor pkgs;
        default = agentpack;
      });

      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = "${self.packages.${pkgs.stdenv.hostPlatform.system}.default}/bin/agentpack";
        };
      });

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.default ];
          packages = [ pkgs.cargo pkgs.rustc pkgs.clippy pkgs.rustfmt pkgs.git pkgs.nodejs ];
        };
      });

      overlays.default = final: _prev: { agentpack = agentpackFor final; };

      # home-manager: `imports = [ agentpack.homeModules.default ]; programs.agentpack.enable = true;`
      homeModules.default = import ./nix/home-module.nix { inherit self; };
    };
}
