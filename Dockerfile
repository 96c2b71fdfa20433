FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY channels ./channels
COPY rag_core ./rag_core
COPY admin_ui ./admin_ui
RUN pip install --no-cache-dir .
EXPOSE 8000
CMD ["switchboard", "serve", "--host", "0.0.0.0", "--port", "8000"]
