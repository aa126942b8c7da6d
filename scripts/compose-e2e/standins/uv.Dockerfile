# Stand-in for ghcr.io/astral-sh/uv:<version>, which only has /uv and /uvx: two shell scripts that
# run a script with python3 and take `uv python install` as done. Scripts' declared dependencies
# are therefore not installed by images built on it.
FROM scratch
COPY uv uvx /
