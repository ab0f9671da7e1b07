// Fixture: nothing here computes a layer quantity.
int tokens(const Plan& p) { return p.micro_batch * p.seq; }
