"""Test configuration: precision per session (JAX_ENABLE_X64=1 runs float64),
and shared fixtures of built-in specs."""

import pytest

import jaxplat as jp


@pytest.fixture(scope="session")
def llama7b():
    return jp.load_model("llama-2-7b")


@pytest.fixture(scope="session")
def llama70b():
    return jp.load_model("llama-3.1-70b")


@pytest.fixture(scope="session")
def h100():
    return jp.load_hardware("h100-sxm")


@pytest.fixture(scope="session")
def chatbot():
    return jp.load_workload("chatbot")
