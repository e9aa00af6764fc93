#!/usr/bin/env bash
# Creates .venv with kmirror and its test tools (PySpark and pyarrow included), installs kcat
# (Debian) when missing, a headless Java runtime (Debian) when `java` is missing (PySpark
# needs Java 17 or later), and Chromium (Debian) when missing: the test of `kmirror verify`'s
# HTML report renders it in headless Chromium. MIT Kerberos (Debian: a KDC for the Kerberos
# tests, libkrb5-dev to build the gssapi package, Cyrus SASL's GSSAPI plugin for kcat) and the
# gssapi package, for SASL/GSSAPI.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "kmirror needs Python >= 3.11 (found $("$PY" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.kmirror-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing kmirror and its Python dependencies into .venv (PySpark is ~500 MB; a first run takes a minute or two)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # (pip's notices about unused local index locations are noise here)
  .venv/bin/python -m pip install -q -e '.[test]' 2>&1 | { grep -v 'is neither a file nor a directory' || true; }
  # The compiled record walks (numba) go to their on-disk cache now, once, rather than in every
  # node started before the first of them has written it (about 10 s of CPU each)
  .venv/bin/python -c 'from kmirror.log.cleaner.warm_up import warm_up; from kmirror.records.record_walk import load_compiled; warm_up(); load_compiled()'
  touch "$stamp"
  echo "bootstrap: Python dependencies installed, compiled record walks cached"
fi

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=sudo; fi
apt_updated=""
apt_install() {  # apt_install PACKAGE...: installs from Debian, updating the package lists once if needed
  command -v apt-get >/dev/null 2>&1 || return 1
  # noninteractive: krb5-config would otherwise ask for a default realm
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" </dev/null >/dev/null 2>&1 && return 0
  if [ -z "$apt_updated" ]; then
    apt_updated=1
    $SUDO apt-get update -q >/dev/null 2>&1 || return 1
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" </dev/null >/dev/null 2>&1 && return 0
  fi
  return 1
}

if ! command -v kcat >/dev/null 2>&1; then
  echo "bootstrap: installing kcat (Debian)"
  apt_install kcat || echo "warning: could not install kcat; its tests will be skipped" >&2
fi

if ! command -v krb5kdc >/dev/null 2>&1 && [ ! -x /usr/sbin/krb5kdc ] || ! command -v krb5-config >/dev/null 2>&1; then
  echo "bootstrap: installing MIT Kerberos (Debian)"
  apt_install krb5-kdc krb5-user libkrb5-dev libsasl2-modules-gssapi-mit \
    || echo "warning: could not install MIT Kerberos; the Kerberos tests will be skipped" >&2
fi
if ! .venv/bin/python -c 'import gssapi' >/dev/null 2>&1; then
  echo "bootstrap: installing the gssapi package (SASL/GSSAPI)"
  { .venv/bin/python -m pip install -q 'gssapi>=1.8' 2>&1 || true; } | { grep -v 'is neither a file nor a directory' || true; }
  .venv/bin/python -c 'import gssapi' >/dev/null 2>&1 \
    || echo "warning: could not install gssapi (needs libkrb5-dev); SASL/GSSAPI and its tests are unavailable" >&2
fi

java_ok() {  # Java 17 or later on PATH
  command -v java >/dev/null 2>&1 || return 1
  local v
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -n "$v" ] && [ "$v" -ge 17 ]
}
if ! java_ok; then
  echo "bootstrap: installing a headless Java runtime for PySpark (Debian)"
  installed=""
  for pkg in openjdk-17-jre-headless openjdk-21-jre-headless default-jre-headless; do
    if apt_install "$pkg" && java_ok; then installed=$pkg; break; fi
  done
  if [ -n "$installed" ]; then
    echo "bootstrap: installed $installed"
  else
    echo "warning: Java 17 or later is needed for PySpark (kmirror.spark) and could not be installed here." >&2
    echo "         Install it with 'apt-get install openjdk-17-jre-headless' (or your system's package)," >&2
    echo "         or set JAVA_HOME; the Spark tests will be skipped until then." >&2
  fi
fi

chromium_path() {  # the first headless-capable Chromium on PATH
  local name
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  done
  return 1
}
if ! chromium_path >/dev/null; then
  echo "bootstrap: installing Chromium (Debian) for the verify report's browser test (a first install takes a minute)"
  if apt_install chromium && chromium_path >/dev/null; then
    echo "bootstrap: installed chromium"
  else
    echo "warning: Chromium could not be installed here; the verify report's browser test is skipped" >&2
    echo "         (and fails when CI is set). Install it with 'apt-get install chromium'." >&2
  fi
fi
