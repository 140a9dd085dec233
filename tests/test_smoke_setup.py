def test_the_cast_has_separate_tenants(cast):
    assert cast.owner.tess_memberships.get().tenant == cast.acme
    assert cast.outsider.tess_memberships.first().tenant == cast.globex
