FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The locked versions first (exact pins with hashes: the image runs what CI tested), in their own layer.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY channels ./channels
COPY rag_core ./rag_core
COPY admin_ui ./admin_ui
RUN pip install --no-cache-dir --no-deps .
EXPOSE 8000
CMD ["switchboard", "serve", "--host", "0.0.0.0", "--port", "8000"]
