# Sourced: create .venv and install a requirements file, skipping the install when nothing changed.
venv_install() {
  local req=$1 stamp
  [ -x .venv/bin/python ] || python3 -m venv .venv
  stamp=".venv/.installed-$(cat requirements*.txt | sha256sum | cut -c1-16)-$(basename "$req")"
  if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -r "$req"
    touch "$stamp"
  fi
}
