#!/usr/bin/env bash
# Build llama.cpp's server and grammar validator from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI (the only registry-reachable copy of llama.cpp's sources).
#
# Output (cached outside the clone, reused by later runs):
#   $LLAMACPP_HOME/bin/llama-server          the OpenAI/completion server (tests/e2e)
#   $LLAMACPP_HOME/bin/test-gbnf-validator   llama.cpp's own grammar parser + acceptance check
#   $LLAMACPP_HOME/vocab/                    the ggml-vocab-*.gguf tokenizer files of the sdist
#   $LLAMACPP_HOME/VERSION                   which sdist was built
# Env: LLAMACPP_HOME (default ~/.cache/autoparser/llama.cpp), LLAMA_CPP_PYTHON_VERSION (pin),
#      JOBS (default nproc). Needs python3 + pip, cmake, a C++17 compiler.
set -euo pipefail
HOME_DIR=${LLAMACPP_HOME:-$HOME/.cache/autoparser/llama.cpp}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
JOBS=${JOBS:-$(nproc)}
STAMP="$HOME_DIR/VERSION"
if [ -x "$HOME_DIR/bin/llama-server" ] && [ -x "$HOME_DIR/bin/test-gbnf-validator" ] \
    && [ "$(cat "$STAMP" 2>/dev/null)" = "llama-cpp-python==$VERSION" ]; then
    echo "llama.cpp: cached build in $HOME_DIR ($(cat "$STAMP"))"
    exit 0
fi
mkdir -p "$HOME_DIR/dl" "$HOME_DIR/src" "$HOME_DIR/bin" "$HOME_DIR/vocab"
if ! ls "$HOME_DIR"/dl/llama_cpp_python-"$VERSION".tar.gz >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$HOME_DIR/dl"
fi
SDIST="$HOME_DIR/dl/llama_cpp_python-$VERSION.tar.gz"
NAME=$(basename "$SDIST" .tar.gz)
[ -d "$HOME_DIR/src/$NAME" ] || tar xzf "$SDIST" -C "$HOME_DIR/src"
SRC="$HOME_DIR/src/$NAME/vendor/llama.cpp"
BUILD="$HOME_DIR/build"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$SRC" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF \
        -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_EXAMPLES=OFF \
        -DGGML_CCACHE=OFF >"$HOME_DIR/configure.log"
fi
cmake --build "$BUILD" -j "$JOBS" --target llama-server test-gbnf-validator
cp "$BUILD/bin/llama-server" "$BUILD/bin/test-gbnf-validator" "$HOME_DIR/bin/"
cp "$SRC"/models/ggml-vocab-*.gguf "$HOME_DIR/vocab/" 2>/dev/null || true
echo "llama-cpp-python==$VERSION" >"$STAMP"
echo "llama.cpp: built $HOME_DIR/bin (llama-cpp-python==$VERSION)"
