# Stand-in for the official postgres image, from Debian's PostgreSQL 15 (server and client tools:
# pg_dump, psql, pg_isready). Its entrypoint honours POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB,
# PGDATA and /docker-entrypoint-initdb.d as the official one does. It is PostgreSQL 15 whatever
# its tag says: results from it say so.
FROM debian:bookworm-slim
RUN groupadd --system --gid 999 postgres \
  && useradd --system --uid 999 --gid postgres --home-dir /var/lib/postgresql --shell /bin/bash postgres \
  && mkdir -p /etc/postgresql-common \
  && printf 'create_main_cluster = false\n' >/etc/postgresql-common/createcluster.conf \
  && apt-get update \
  && apt-get install -y --no-install-recommends postgresql-15 \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir -p /var/lib/postgresql /var/run/postgresql /docker-entrypoint-initdb.d \
  && chown postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
