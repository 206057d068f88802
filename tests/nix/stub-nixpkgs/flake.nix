# A stand-in for nixpkgs, for checking agentpack's flake offline (GitHub is unreachable in CI).
#
# It provides exactly what flake.nix and nix/home-module.nix use, built from `builtins.derivation`, so
# `nix flake check --no-build --override-input nixpkgs path:tests/nix/stub-nixpkgs` evaluates every
# output for real: a missing attribute or a type error in our flake fails the check.
{
  outputs = { self }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      genAttrs = names: f: builtins.listToAttrs (map (name: { inherit name; value = f name; }) names);
      stubDrv = system: name: attrs: derivation {
        inherit name system;
        builder = "/bin/sh";
        args = [ "-c" "echo stub > $out" ];
        # Keep what the caller passed visible, so the checks can inspect it.
        passAsFile = [ "attrsJson" ];
        attrsJson = builtins.toJSON (builtins.removeAttrs attrs [ "inputsFrom" "packages" "meta" "src" ]);
      };
      pkgsFor = system: rec {
        stdenv.hostPlatform.system = system;
        lib = self.lib;
        rustPlatform.buildRustPackage = args:
          assert builtins.isString args.pname && builtins.isString args.version;
          assert builtins.pathExists args.cargoLock.lockFile;
          (stubDrv system "${args.pname}-${args.version}" args) // { inherit (args) meta; };
        mkShell = args: stubDrv system "shell" {
          # Forces every listed package, so a missing attribute fails the check.
          inputNames = map (p: p.name) ((args.packages or [ ]) ++ (args.inputsFrom or [ ]));
        };
        cargo = stubDrv system "cargo" { };
        rustc = stubDrv system "rustc" { };
        clippy = stubDrv system "clippy" { };
        rustfmt = stubDrv system "rustfmt" { };
        git = stubDrv system "git" { };
        nodejs = stubDrv system "nodejs" { };
      };
    in
    {
      lib = {
        inherit genAttrs;
        licenses.mit = { spdxId = "MIT"; };
        mkEnableOption = description: { _type = "option"; default = false; inherit description; };
        mkOption = attrs: attrs // { _type = "option"; };
        literalExpression = text: { _type = "literalExpression"; inherit text; };
        mkIf = condition: content: { _type = "if"; inherit condition content; };
        optionalAttrs = cond: attrs: if cond then attrs else { };
        types = {
          package = "package";
          str = "str";
          nullOr = t: "nullOr ${t}";
        };
      };
      legacyPackages = genAttrs systems pkgsFor;
    };
}
