# Sourced by scripts/setup and scripts/test: which venv a (torch, Python) pair
# lives in, so that both name it the same way.
#
#   .venv                      torch 2.15.0, Python 3.11 (the reference one)
#   .venv-torch2.11            TORCH_VERSION=2.11.0 (any other of 2.11.0 ... 2.15.x)
#   .venv-torch2.11-py3.12     the same with PYTHON=/path/to/python3.12
#   .venv-py3.12               torch 2.15.0 with PYTHON=/path/to/python3.12
#
# venv_dir TORCH_VERSION PYTHON prints the directory, or says why not and fails.
venv_dir() {
    local torch=$1 py=$2 dir ver
    case "$torch" in
        2.15.0) dir=.venv ;;
        2.1[1-5].*) dir=.venv-torch${torch%.*} ;;
        *) echo "TORCH_VERSION=$torch is not one this project supports (2.11.0 ... 2.15.0)" >&2; return 2 ;;
    esac
    if ! ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
        echo "PYTHON=$py does not run" >&2; return 2
    fi
    case "$ver" in
        3.11) ;;
        3.12) dir=$dir-py$ver ;;
        *) echo "PYTHON=$py is Python $ver; this project supports 3.11 and 3.12" >&2; return 2 ;;
    esac
    echo "$dir"
}
