import pytest

from transformer_edu import count_parameters, make_model
from transformer_edu.modern.scaling import (
    layer_params,
    non_embedding_params,
    training_flops,
)


@pytest.mark.parametrize(("d_model", "n_layers", "d_ff"), [(16, 1, 32), (64, 2, 256)])
def test_the_count_is_the_models_own(d_model, n_layers, d_ff):
    model = make_model(30, 40, n_layers=n_layers, d_model=d_model, n_heads=4, d_ff=d_ff)
    n_enc, n_dec = non_embedding_params(d_model, n_layers, d_ff)
    assert n_enc == count_parameters(model.encoder)
    assert n_dec == count_parameters(model.decoder)
    assert layer_params(d_model, d_ff, True) == count_parameters(
        model.decoder.layers[0]
    )


def test_six_flops_per_parameter_and_token_through_its_own_stack():
    n_enc, n_dec = non_embedding_params(64, 1, 256)
    assert training_flops(64, 1, 256, 10, 0) == 6 * n_enc * 10
    assert training_flops(64, 1, 256, 0, 7) == 6 * n_dec * 7
    assert training_flops(64, 2, 256, 3, 5) == 2 * training_flops(64, 1, 256, 3, 5)
