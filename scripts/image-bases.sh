#!/usr/bin/env bash
# The two base images deploy/Dockerfile builds FROM, for scripts/image.sh (`make image`):
#   scripts/image-bases.sh ENGINE      ENGINE: docker, podman or buildah
# Prints the --build-arg pairs to pass (none when the registry's images are used), one a line:
#   BUILD_BASE=localhost/debian-debootstrap:bookworm
#   RUNTIME_BASE=localhost/debian-debootstrap:bookworm-slim
#
# The registry's debian:bookworm and debian:bookworm-slim when they can be pulled (for at most a
# minute: a machine without registry access fails at once, on a DNS lookup). Otherwise the
# same Debian release made from Debian's archive with debootstrap (--variant=minbase, what the
# registry's images are made of too), imported into the engine's image store once and reused by
# every later build: they are named localhost/debian-debootstrap so that no one takes them for
# the registry's. The -slim one leaves out documentation, manual pages and translations, as the
# registry's -slim does. IMAGE_BASES=registry or IMAGE_BASES=debootstrap forces one way;
# IMAGE_REFRESH_BASES=1 makes the debootstrapped bases again (a newer point release).
set -euo pipefail
engine=${1:?usage: scripts/image-bases.sh docker|podman|buildah}
mode=${IMAGE_BASES:-auto}
release=bookworm
local_name=localhost/debian-debootstrap
log() { echo "image-bases: $*" >&2; }

have_image() {
  case "$engine" in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    podman) podman image exists "$1" ;;
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
  esac
}

pull() {
  # The registry's image, or a failure within 60 s (a slow registry counts as none).
  have_image "docker.io/library/$1" && return 0
  timeout 60 "$engine" pull -q "docker.io/library/$1" >/dev/null 2>&1
}

# The Debian archive as this machine's apt is configured (one-line and deb822 sources), so that a
# mirror or proxy set up here is used; Debian's own otherwise.
mirror_for() {  # mirror_for SUITE
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v s="$1" '$1 == "deb" {
      for (i = 2; i < NF; i++) if ($i ~ /^(http|https|file):/ && $(i + 1) == s) { print $i; exit }
    }')
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v s="$1" '
      function found() { if (u != "" && ok) { print u; done = 1; exit } }
      /^[[:space:]]*$/ { found(); u = ""; ok = 0; next }
      tolower($1) == "uris:" { u = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
      END { if (!done) found() }')
  fi
  echo "${uri:-$2}"
}

# debootstrap into DIR, then the apt sources and the apt settings the registry's images have.
make_rootfs() {
  local dir=$1 main security
  main=$(mirror_for "$release" http://deb.debian.org/debian)
  security=$(mirror_for "$release-security" http://deb.debian.org/debian-security)
  log "debootstrap --variant=minbase $release from $main (a minute or two)"
  debootstrap --variant=minbase "$release" "$dir" "$main" >"$dir.log" 2>&1 || {
    tail -n 20 "$dir.log" >&2
    return 1
  }
  rm -f "$dir/etc/apt/sources.list"
  cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $main
Suites: $release $release-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $release-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # Downloaded packages are deleted once installed, and no recommended packages come along: a
  # layer keeps only what was asked for (the registry's images configure apt the same way).
  cat >"$dir/etc/apt/apt.conf.d/90image" <<'EOF'
APT::Install-Recommends "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
EOF
  rm -rf "${dir:?}"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/* \
    "${dir:?}"/dev/* "$dir"/run/* "$dir"/tmp/*
}

# -slim: dpkg installs no documentation (copyright notices excepted), manual pages or
# translations from now on, and those already installed go.
slim_rootfs() {
  local dir=$1
  cat >"$dir/etc/dpkg/dpkg.cfg.d/90image-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  find "$dir/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* \
    "$dir"/usr/share/lintian/*
}

import_rootfs() {  # import_rootfs DIR NAME
  local dir=$1 name=$2 ctr
  local path=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  case "$engine" in
    docker | podman)
      tar -C "$dir" -c . | "$engine" import -c "ENV $path" -c 'CMD ["bash"]' - "$name" >/dev/null ;;
    buildah)
      # buildah add unpacks a local archive as it stands (owners, modes, links).
      tar -C "$dir" -cf "$dir.tar" .
      ctr=$(buildah from scratch)
      buildah add "$ctr" "$dir.tar" / >/dev/null
      rm -f "$dir.tar"
      buildah config --env "$path" --cmd bash "$ctr"
      buildah commit -q --rm "$ctr" "$name" >/dev/null
      ;;
  esac
}

debootstrap_bases() {
  if [ "${IMAGE_REFRESH_BASES:-0}" != 1 ] && have_image "$local_name:$release" &&
    have_image "$local_name:$release-slim"; then
    return 0
  fi
  command -v debootstrap >/dev/null ||
    { log "debootstrap is missing: apt-get install debootstrap"; exit 1; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/image-bases.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  make_rootfs "$work/rootfs"
  import_rootfs "$work/rootfs" "$local_name:$release"
  slim_rootfs "$work/rootfs"
  import_rootfs "$work/rootfs" "$local_name:$release-slim"
  log "imported $local_name:$release and $local_name:$release-slim"
}

if [ "$mode" != debootstrap ] && pull "$release" && pull "$release-slim"; then
  exit 0
fi
[ "$mode" != registry ] || { log "cannot pull debian:$release from the registry"; exit 1; }
[ "$mode" = debootstrap ] ||
  log "the registry's debian:$release cannot be pulled: using Debian's archive"
debootstrap_bases
echo "BUILD_BASE=$local_name:$release"
echo "RUNTIME_BASE=$local_name:$release-slim"
