import pytest

from env_helpers import ENV_IDS


@pytest.fixture(params=ENV_IDS)
def env_id(request):
    return request.param
