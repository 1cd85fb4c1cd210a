# Multi-stage build of the actiongate daemon.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# jemalloc (the daemon's allocator) is built with make, which the slim
# image lacks.
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cargo build --release --locked -p actiongate

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home /var/lib/actiongate actiongate \
    && mkdir -p /var/lib/actiongate /etc/actiongate \
    && chown actiongate /var/lib/actiongate
COPY --from=build /src/target/release/actiongate /usr/local/bin/actiongate
COPY config/actiongate.toml /etc/actiongate/actiongate.toml
USER actiongate
VOLUME ["/var/lib/actiongate"]
ENV ACTIONGATE_DATA_DIR=/var/lib/actiongate \
    ACTIONGATE_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["actiongate", "--config", "/etc/actiongate/actiongate.toml"]
CMD ["serve"]
