// Fixture: nothing here computes a layer quantity.
double share(const Group& g) { return 1.0 / double(g.size); }
